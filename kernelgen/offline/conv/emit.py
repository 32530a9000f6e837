"""Kernel text of a convolution stage: an implicit GEMM over the input -- no im2col buffer: each
program gathers its [BLOCK_M output pixels, BLOCK_K] tile of the input through the convolution's
index arithmetic, masks standing for the zero padding -- then the stage's epilogue on the fp32
accumulator tile and one rounding store per output (as a matmul stage's: emit_matmul.py).

Rows (M) are output pixels (batch and output positions, the last spatial dim fastest: coalesced
along a row of an NCHW output), columns (N) output channels of one group, K the group's input
channels times the kernel's taps. Three forms, by what the trace fixes:
  forward     grid (M tiles x N tiles, groups). K as a loop over the taps (tap indices and masks
              once per tap), BLOCK_K channels at a time -- or, where a group has fewer than 16
              channels (FLAT_K: a tap's step would be mostly padding for tl.dot's K >= 16), the
              (channel, tap) pairs flattened into K, each lane decomposing its own pair.
  transposed  the data-gradient (gather) form, split by stride phase: the grid's second axis is
              (group, phase), a phase being one residue of the output position per stride; only
              the taps with (o + pad - tap * dilation) divisible by the stride reach it, and a
              program loops over those alone (1 in stride**dims taps: 1 in 8 for a 3-D stride 2).
  direct      one input channel per group (depthwise, and any single-channel input): no tl.dot --
              its K would be the taps alone, padded to 16 -- but per-tap fp32 multiply-adds on a
              [BLOCK_M pixels, BLOCK_N channels] tile, every output channel in one grid axis.
fp32 operands multiply in the precision the wrapper names (`PRECISION`: "tf32x3" on NVIDIA GPUs, as
accurate as cuDNN's IEEE algorithms, which it picks for many shapes even with TF32 allowed; "ieee"
elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.frontend.ir import Graph
from kernelgen.offline.stages.access import MOVES, Port, ports
from kernelgen.offline.stages.emit_epilogue import computes, tile_epilogue
from kernelgen.offline.stages.program import Buffer, Stage

DIM_NAMES = {1: ("l",), 2: ("h", "w"), 3: ("d", "h", "w")}


@dataclass
class ConvKernel:
    name: str
    kind: str
    form: str  # forward | transposed | direct
    params: list[tuple[str, str]]
    body: list[str]
    ports: list[Port]
    dims: tuple[str, ...]  # the spatial dims' names: ("h", "w")
    moves: tuple[bool, bool]  # x, w: their views may move the start (an offset argument)
    sizes: list[int]
    params_used: list[str]
    epilogue: bool  # the epilogue computes on the accumulator (its tiles: kernelgen.offline.launch.conv_tiles)


def conv_form(g: Graph, st: Stage) -> str:
    v = g[st.anchor]
    if v.attrs["transposed"]:
        return "transposed"
    return "direct" if S.is_one(g[v.args[1]].shape[1]) else "forward"


def conv_kernel(g: Graph, st: Stage, buffers: dict[str, Buffer], name: str) -> ConvKernel:
    ps = ports(g, st, buffers)
    v = g[st.anchor]
    dims = DIM_NAMES[v.attrs["n"]]
    form = conv_form(g, st)
    moves = tuple(any(s[0] in MOVES for s in acc.views) for acc in st.operands)
    body = _rows(form, dims) + _bases(form, moves) + _k_loop(form, dims) + _epilogue(g, st, ps, buffers, dims)
    used = sorted({g[u].attrs["name"] for u in st.values if g[u].op == "param"})
    sizes = [u for u in st.values if g[u].op == "size"]
    return ConvKernel(name, "conv", form, _params(g, st, ps, form, dims, moves, used, sizes), body, ps, dims, moves,
                      sizes, used, computes(g, st))


def _decompose(index: str, parts: list[tuple[str, str]], last: str, rest: str = "rest") -> list[str]:
    """`index` split into mixed-radix digits, the last listed fastest: [(digit, radix), ..] + the rest
    (`rest`: the name of what is left between two digits)."""
    L, name = [], rest
    rest = index
    for i, (digit, radix) in enumerate(reversed(parts)):
        L.append(f"{digit} = {rest} % {radix}")
        nxt = name if i < len(parts) - 1 else last
        L.append(f"{nxt} = {rest} // {radix}")
        rest = nxt
    return L


def _rows(form: str, dims: tuple[str, ...]) -> list[str]:
    """The program's tile: the grouped program order, its rows' output pixels, its channels."""
    outs = [f"n{2 + j}" for j in range(len(dims))]
    L: list[str] = []
    if form == "transposed":
        L += ["# the grid's second axis: (group, stride phase); a phase fixes o % stride along every dim",
              "g = tl.program_id(1) // PHASES", "phase = tl.program_id(1) % PHASES"]
        L += _decompose("phase", [(f"r_{d}", f"STRIDE_{d.upper()}") for d in dims], "_")[:-1]
        L += [f"qn_{d} = tl.cdiv({o}, STRIDE_{d.upper()})  # output positions of this phase along {d}"
              for d, o in zip(dims, outs)]
        L.append("M = n0 * " + " * ".join(f"qn_{d}" for d in dims))
    else:
        L += ["g = tl.program_id(1)" if form == "forward" else "# every output channel on the grid's first axis",
              "M = n0 * " + " * ".join(outs)]
    cols = "n1" if form == "direct" else "COUT_G"
    L += ["pid = tl.program_id(0)", "num_pid_m = tl.cdiv(M, BLOCK_M)", f"num_pid_n = tl.cdiv({cols}, BLOCK_N)",
          "num_pid_in_group = GROUP_SIZE_M * num_pid_n", "group_id = pid // num_pid_in_group",
          "first_pid_m = group_id * GROUP_SIZE_M", "group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)",
          "pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)",
          "pid_n = (pid % num_pid_in_group) // group_size_m",
          "rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)", "rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
          "if I64:", "    rm = rm.to(tl.int64)", "    rn = rn.to(tl.int64)",
          f"n_ok = rn < {cols}"]
    if form == "transposed":
        L += ["# each row's output pixel: its batch, and its position q within the phase (o = r + q * stride)"]
        L += _decompose("rm", [(f"q_{d}", f"qn_{d}") for d in dims], "nb")
        L += [f"o_{d} = r_{d} + q_{d} * STRIDE_{d.upper()}" for d in dims]
        L.append("m_ok = (rm < M) & " + " & ".join(f"(o_{d} < {o})" for d, o in zip(dims, outs)))
    else:
        L += ["# each row's output pixel: its batch and its position"]
        L += _decompose("rm", [(f"o_{d}", o) for d, o in zip(dims, outs)], "nb")
        L.append("m_ok = rm < M")
    L.append("co = rn" if form == "direct" else "co = g * COUT_G + rn  # output channels")
    return L


def _bases(form: str, moves: tuple[bool, ...]) -> list[str]:
    x = "x_ptr" + (" + x_off" if moves[0] else "")
    w = "w_ptr" + (" + w_off" if moves[1] else "")
    if form == "direct":
        return [f"x_rows = {x} + nb * x_sn  # [BLOCK_M]",
                "x_cols = (co // COUT_G) * x_sc  # [BLOCK_N]: the one input channel of each output channel's group",
                f"w_cols = {w} + co * w_s0"]
    if form == "transposed":  # the weight is [C_in, C_out / groups, taps..]
        return [f"x_rows = {x} + nb * x_sn + (g * CIN_G) * x_sc", f"w_cols = {w} + (g * CIN_G) * w_s0 + rn * w_s1",
                "rk = tl.arange(0, BLOCK_K)"]
    return [f"x_rows = {x} + nb * x_sn + (g * CIN_G) * x_sc", f"w_cols = {w} + co * w_s0", "rk = tl.arange(0, BLOCK_K)"]


def _taps(index: str, dims: tuple[str, ...]) -> list[str]:
    """A tap number split into its position along each spatial dim (the last dim fastest)."""
    if len(dims) == 1:
        return [f"t_{dims[0]} = {index}"]
    *outer, last = dims
    L = [f"t_{last} = {index} % KS_{last.upper()}"]
    if len(outer) == 1:
        return L + [f"t_{outer[0]} = {index} // KS_{last.upper()}"]
    return L + [f"t_dh = {index} // KS_{last.upper()}", f"t_h = t_dh % KS_H", "t_d = t_dh // KS_H"]


def _in_bounds(dims: tuple[str, ...]) -> str:
    return " & ".join(f"(i_{d} >= 0) & (i_{d} < in_{d})" for d in dims)


def _dot(a: str, b: str, mask_a: str, mask_b: str, depth: str) -> list[str]:
    return [f"{depth}a = tl.load({a}, mask={mask_a}, other=0.0)",
            f"{depth}b = tl.load({b}, mask={mask_b}, other=0.0)",
            f"{depth}if UPCAST:  # operands of two dtypes (an fp32 buffer between stages), or bf16 under the CPU interpreter",
            f"{depth}    a = a.to(tl.float32)", f"{depth}    b = b.to(tl.float32)",
            f"{depth}if ROUND_TF32:  # to the nearest TF32, as cuDNN rounds: the tensor core would truncate",
            f"{depth}    a = ((a.to(tl.uint32, bitcast=True) + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)",
            f"{depth}    b = ((b.to(tl.uint32, bitcast=True) + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)",
            f"{depth}acc = tl.dot(a, b, acc=acc, input_precision=PRECISION)"]


def _k_loop(form: str, dims: tuple[str, ...]) -> list[str]:
    """The reduction over (input channel, tap) into the fp32 accumulator."""
    x_sp = " + ".join(f"i_{d} * x_s{d}" for d in dims)
    w_sp = " + ".join(f"t_{d} * w_s{d}" for d in dims)
    geo = {d: (f"STRIDE_{d.upper()}", f"PAD_{d.upper()}", f"DIL_{d.upper()}") for d in dims}
    L = ["acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)"]
    if form == "direct":
        L += ["for t in range(0, TAPS):", *["    " + s for s in _taps("t", dims)]]
        L += [f"    i_{d} = o_{d} * {s} - {p} + t_{d} * {dl}" for d, (s, p, dl) in geo.items()]
        L += [f"    ok = m_ok & {_in_bounds(dims)}",
              f"    xv = tl.load(x_rows[:, None] + x_cols[None, :] + ({x_sp})[:, None], mask=ok[:, None] & n_ok[None, :], other=0.0)",
              f"    wv = tl.load(w_cols + {w_sp}, mask=n_ok, other=0.0)",
              "    acc += xv.to(tl.float32) * wv.to(tl.float32)[None, :]"]
        return L
    if form == "transposed":
        return L + _phase_taps(dims, x_sp, w_sp)
    # A lane's address is its row's first input position plus its own channel's and tap's offset,
    # [BLOCK_M] + [BLOCK_K]; bounds only along a dim where a tap can leave the input (EDGE_*). A
    # [BLOCK_M, BLOCK_K] index per dim (a product, two sums and two compares an element each, then the
    # address's sums) had level 2's 7 (Conv3d 8->32 channels, K = 216) at 7.7 TFLOP/s, x0.49 of eager
    # (H100, 2026-12-07): integer work per loaded element, not the tensor cores, bounded it.
    L += [f"b_{d} = o_{d} * {s} - {p}" for d, (s, p, _) in geo.items()]
    L += ["x_base = x_rows + " + " + ".join(f"b_{d} * x_s{d}" for d in dims) + "  # [BLOCK_M]: each row's first input position",
          "if FLAT_K:  # few channels per group: (channel, tap) pairs flattened into K, each lane its own",
          "    for k0 in range(0, CIN_G * TAPS, BLOCK_K):", "        k = k0 + rk", "        k_ok = k < CIN_G * TAPS",
          "        c = k // TAPS", "        tap = k % TAPS", *["        " + s for s in _taps("tap", dims)],
          "        ok = m_ok[:, None] & k_ok[None, :]"]
    for d, (_, _, dl) in geo.items():
        L += [f"        if EDGE_{d.upper()}:", f"            i_{d} = b_{d}[:, None] + (t_{d} * {dl})[None, :]",
              f"            ok = ok & (i_{d} >= 0) & (i_{d} < in_{d})"]
    L += _dot(f"x_base[:, None] + (c * x_sc + {_x_tap(geo)})[None, :]", f"w_cols[None, :] + (c * w_s1 + {w_sp})[:, None]",
              "ok", "k_ok[:, None] & n_ok[None, :]", "        ")
    # (tap, channel block) pairs in one loop: Triton software-pipelines only an innermost loop, and a loop
    # over a tap's channels restarted its pipeline at every tap (64 channels in steps of 16: 4 steps to
    # fill 4 stages, 9 times a tile at 3x3) or had nothing to pipeline (16 channels: one step a tap)
    L += ["elif ONE_LOOP:  # (tap, channel block) pairs in one loop, BLOCK_K input channels at a time",
          *["    " + s for s in _channel_steps("TAPS", "t")], *["        " + s for s in _taps("t", dims)]]
    L += _tap(geo, w_sp, "        ") + _block_dot("w_s1", "        ")
    L += ["else:  # a loop over a tap's channel blocks inside the loop over taps (ONE_LOOP off)",
          "    for t in range(0, TAPS):", *["        " + s for s in _taps("t", dims)]]
    return L + _tap(geo, w_sp, "        ") + _channel_loop("        ") + _block_dot("w_s1", "            ")


def _x_tap(geo: dict[str, tuple[str, str, str]]) -> str:
    """A tap's offset in the input from a row's first position: its position along each dim, dilated."""
    return " + ".join(f"t_{d} * {dl} * x_s{d}" for d, (_, _, dl) in geo.items())


def _channel_steps(taps: str, tap: str) -> list[str]:
    """One loop over `taps` taps x the channel blocks, `tap` the pair's tap: Triton pipelines it whole."""
    return ["n_c = tl.cdiv(CIN_G, BLOCK_K)", f"for kk in range(0, {taps} * n_c):", f"    {tap} = kk // n_c",
            "    c = (kk % n_c) * BLOCK_K + rk", "    c_ok = c < CIN_G"]


def _channel_loop(depth: str) -> list[str]:
    """A tap's channel blocks as a loop of their own (ONE_LOOP off)."""
    return [f"{depth}for c0 in range(0, CIN_G, BLOCK_K):", f"{depth}    c = c0 + rk", f"{depth}    c_ok = c < CIN_G"]


def _block_dot(w_c: str, depth: str) -> list[str]:
    """A channel block's product into the accumulator: the tap's input rows by its weight (`w_c`: the
    weight's stride along input channels, w_s1 forward, w_s0 transposed)."""
    return _dot("x_tap[:, None] + c[None, :] * x_sc", f"w_tap[None, :] + c[:, None] * {w_c}",
                "ok[:, None] & c_ok[None, :]", "c_ok[:, None] & n_ok[None, :]", depth)


def _tap(geo: dict[str, tuple[str, str, str]], w_sp: str, depth: str) -> list[str]:
    """A tap's rows in bounds (checked only along a dim where a tap can leave the input) and its addresses."""
    L = [f"{depth}ok = m_ok"]
    for d, (_, _, dl) in geo.items():
        L += [f"{depth}if EDGE_{d.upper()}:", f"{depth}    i_{d} = b_{d} + t_{d} * {dl}",
              f"{depth}    ok = ok & (i_{d} >= 0) & (i_{d} < in_{d})"]
    return L + [f"{depth}x_tap = x_base + ({_x_tap(geo)})", f"{depth}w_tap = w_cols + {w_sp}"]


def _phase_taps(dims: tuple[str, ...], x_sp: str, w_sp: str) -> list[str]:
    """The taps that reach this program's stride phase, and only those: along a dim, o + pad - tap *
    dilation must divide by the stride, which holds for every TSTEP-th tap (stride / gcd(stride,
    dilation)) from the first that does -- found in a loop of TSTEP steps, KS (none) if no tap does."""
    L = ["# the taps that reach this phase: o + pad - tap * dilation divisible by the stride, every TSTEP-th"]
    for d in dims:
        D = d.upper()
        L += [f"t0_{d} = KS_{D}", f"for t in range(0, TSTEP_{D}):",
              f"    t0_{d} = tl.where(((r_{d} + PAD_{D} - t * DIL_{D}) % STRIDE_{D} == 0) & (t0_{d} == KS_{D}), t, t0_{d})"]
    # this phase's taps and the channel blocks in one loop, as the forward form's (ONE_LOOP): Triton
    # pipelines only an innermost loop, and a channel loop nested in the taps' refilled it at every tap
    L += [f"n_{d} = (KS_{d.upper()} - t0_{d} + TSTEP_{d.upper()} - 1) // TSTEP_{d.upper()}  # this phase's taps along {d}"
          for d in dims]
    # this phase's taps counted from 0 along each dim (the last fastest), then each tap's number
    count = " * ".join(f"n_{d}" for d in dims)
    digits = _decompose("j", [(f"j_{d}", f"n_{d}") for d in dims[1:]], f"j_{dims[0]}", rest="j") if len(dims) > 1 else \
        [f"j_{dims[0]} = j"]
    L += ["if ONE_LOOP:", *["    " + s for s in _channel_steps(count, "j")], *["        " + s for s in digits]]
    L += [f"        t_{d} = t0_{d} + j_{d} * TSTEP_{d.upper()}" for d in dims]
    L += _phase_tap(dims, x_sp, w_sp, "        ") + _block_dot("w_s0", "        ")
    L.append("else:  # a loop over a tap's channel blocks inside the loops over this phase's taps (ONE_LOOP off)")
    depth = "    "
    for d in dims:
        L.append(f"{depth}for t_{d} in range(t0_{d}, KS_{d.upper()}, TSTEP_{d.upper()}):")
        depth += "    "
    return L + _phase_tap(dims, x_sp, w_sp, depth) + _channel_loop(depth) + _block_dot("w_s0", depth + "    ")


def _phase_tap(dims: tuple[str, ...], x_sp: str, w_sp: str, depth: str) -> list[str]:
    """A phase tap's input rows (exact: o = i * stride - pad + tap * dilation), in bounds, and its addresses."""
    L = [f"{depth}i_{d} = q_{d} + (r_{d} + PAD_{d.upper()} - t_{d} * DIL_{d.upper()}) // STRIDE_{d.upper()}" for d in dims]
    return L + [f"{depth}ok = m_ok & {_in_bounds(dims)}", f"{depth}x_tap = x_rows + {x_sp}", f"{depth}w_tap = w_cols + {w_sp}"]


def _index(f: int, dims: tuple[str, ...]) -> str:
    """A frame dim's index on the [BLOCK_M, BLOCK_N] tile."""
    return "nb[:, None]" if f == 0 else "co[None, :]" if f == 1 else f"o_{dims[f - 2]}[:, None]"


def _address(st: Stage, p: Port, dims: tuple[str, ...]) -> str:
    """An epilogue access's [BLOCK_M, BLOCK_N] of addresses (broadcast where it runs along pixels or
    channels only). Every frame dim is a group of its own: the wrapper merges none of a conv's."""
    parts = [f"{p.name}_ptr"] + ([f"{p.name}_off"] if p.offset else [])
    walked = [st.groups[gi][-1] for gi in p.groups]
    parts += [f"{_index(f, dims)} * {p.stride(gi)}" for gi, f in zip(p.groups, walked)]
    addr = " + ".join(parts)
    if 1 not in walked or not any(f != 1 for f in walked):
        addr = f"tl.broadcast_to({addr}, [BLOCK_M, BLOCK_N])"
    return addr


def _epilogue(g: Graph, st: Stage, ps: list[Port], buffers: dict[str, Buffer], dims: tuple[str, ...]) -> list[str]:
    """The stage's values on the accumulator tile, then one rounding store per output."""
    return (["# epilogue on the fp32 accumulator, then one rounding store per output",
             "mask = m_ok[:, None] & n_ok[None, :]"]
            + tile_epilogue(g, st, ps, buffers, lambda p: _address(st, p, dims), lambda f: _index(f, dims)))


def _params(g: Graph, st: Stage, ps: list[Port], form: str, dims: tuple[str, ...], moves: tuple[bool, ...],
            used: list[str], sizes: list[int]) -> list[tuple[str, str]]:
    """The kernel's arguments, each with its comment."""
    w_layout = "[C_in, C_out / groups, taps..]" if form == "transposed" else "[C_out, C_in / groups, taps..]"
    params = [("x_ptr", "the input [N, C_in, " + ", ".join(dims) + "]"), ("w_ptr", f"the weight {w_layout}")]
    params += [(f"{p.name}_ptr", f"{p.buffer}, {'written' if p.store else 'read'} by the epilogue") for p in ps]
    params += [(n, f"scalar param {n}") for n in used]
    params += [(f"c{u}", f"the size {g[u].attrs['expr']}, as a number") for u in sizes]
    params += [("n0", "N: the batch"), ("n1", "output channels")]
    params += [(f"n{2 + j}", f"output size along {d}") for j, d in enumerate(dims)]
    params += [(f"in_{d}", "input sizes along the spatial dims" if j == 0 else "") for j, d in enumerate(dims)]
    params += [("CIN_G", "input channels per group"), ("COUT_G", "output channels per group")]
    params += [(f"{o}_off", f"{o}: element offset of its view") for o, m in zip(("x", "w"), moves) if m]
    params += [("x_sn", "input strides: batch, channel, spatial"), ("x_sc", "")] + [(f"x_s{d}", "") for d in dims]
    params += [("w_s0", "weight strides"), ("w_s1", "")] + [(f"w_s{d}", "") for d in dims]
    for p in ps:
        if p.offset:
            params.append((f"{p.name}_off", f"{p.name}: element offset of its view"))
        for gi in p.groups:
            params.append((p.stride(gi), f"{p.name}: element strides over the frame" if gi == p.groups[0] else ""))
    for what, key in (("stride", "STRIDE"), ("padding (low side)", "PAD"), ("dilation", "DIL"), ("kernel size", "KS")):
        params += [(f"{key}_{d.upper()}: tl.constexpr", f"{what} along {', '.join(dims)}" if j == 0 else "")
                   for j, d in enumerate(dims)]
    if form == "transposed":
        params += [(f"TSTEP_{d.upper()}: tl.constexpr", "taps between two that reach one phase: stride / gcd(stride, "
                    "dilation)" if j == 0 else "") for j, d in enumerate(dims)]
        params.append(("PHASES: tl.constexpr", "stride phases: the product of the strides"))
    else:
        params.append(("TAPS: tl.constexpr", "kernel positions: the product of the kernel sizes"))
    params += [("BLOCK_M: tl.constexpr", "output pixels per tile"), ("BLOCK_N: tl.constexpr", "output channels per tile")]
    if form != "direct":
        params.append(("BLOCK_K: tl.constexpr", "reduction step (input channels, or (channel, tap) pairs)"))
    params.append(("GROUP_SIZE_M: tl.constexpr", "pixel-blocks per group of programs (L2 reuse of the weight)"))
    if form != "direct":
        params.append(("ONE_LOOP: tl.constexpr", "(tap, channel block) pairs in one loop, not a channel loop in each tap's"))
    if form == "forward":
        params.append(("FLAT_K: tl.constexpr", "K as flattened (channel, tap) pairs rather than a loop over taps"))
        params += [(f"EDGE_{d.upper()}: tl.constexpr", "a tap can fall outside the input along d, h, w (padding, or sizes "
                    "that leave some): bounds checked only there" if j == 0 else "") for j, d in enumerate(dims)]
    if form != "direct":
        params += [("PRECISION: tl.constexpr", 'fp32 products: "tf32", "tf32x3" or "ieee"'),
                   ("ROUND_TF32: tl.constexpr", "fp32 operands rounded to the nearest TF32 before one TF32 product"),
                   ("UPCAST: tl.constexpr", "multiply in fp32: operands of two dtypes, or bf16 under the CPU interpreter")]
    params += [("ROUND: tl.constexpr", "results kept for a later stage rounded to float16 (1), bfloat16 (2), or not (0)"),
               ("I64: tl.constexpr", "64-bit offsets (a buffer of 2**31 elements or more)")]
    return params
